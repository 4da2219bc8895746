"""The read side: planning from routes, the stream and batch readers on the driver, the executor's read."""
