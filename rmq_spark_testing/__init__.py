"""The test and demo harness of a checkout: the embedded Apache RocketMQ of jvm-shim (``embedded``) and the demo
(``demo``). It needs the checkout's jvm-shim/ and is not part of the wheel, which ships ``rmq_spark`` and
``pyspark_rocketmq`` only."""
