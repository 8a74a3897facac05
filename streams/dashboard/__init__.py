"""The built-in dashboard: a JSON API over ClickHouse and the page that reads it (served by the worker's
web server or by ``groundwatch dashboard``)."""
