"""Local Kafka-protocol brokers for tests and the demo."""
