"""groundwatch on one machine, for the demo, tests and benchmarks: the embedded Tansu broker, a worker in a
child process followed through its status file, and both together (``LocalStack``). A deployed worker
uses none of this."""
