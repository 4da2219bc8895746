"""The apache.rocketmq.v2 gRPC transport: the client interface of ``client/remoting`` over a v2 endpoint that
implements the pull-consumer calls (the rmq-spark pull gateway of jvm-shim, or any server that does)."""
