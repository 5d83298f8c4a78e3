"""Where the job runs: ``local``, ``flink`` and ``kafka``.

``local`` runs in-process, ``flink`` on a MiniCluster (or the cluster under ``flink run``),
``kafka`` on Flink with Kafka input and/or output.

Each takes the built agent and returns the output and error rows (``kafka`` with Kafka output:
none, the rows are in the topics). Only ``flink`` and ``kafka`` import PyFlink.
"""
