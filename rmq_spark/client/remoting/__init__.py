"""The native RocketMQ remoting protocol: frames, connections, name server and broker requests, message codec."""
