"""The sink: rows become RocketMQ messages (``columns``), routed to queues (``routing``), sent in batches per queue by
each task (``sender``) and, for exactly-once, committed or rolled back by the driver (``transactions``).
``writers`` holds the PySpark writer classes."""
