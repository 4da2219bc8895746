"""Helpers and fakes shared by the unit, integration and deployment tests: waiting on conditions and processes,
reading a checkpoint, finished calls, Arrow batch comparison, recorded broker bytes, and scripted loopback peers."""
