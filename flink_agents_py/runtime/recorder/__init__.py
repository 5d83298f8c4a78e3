"""The recorder and its records: an action execution's call identities, replay and outcomes.

``ActionExecution`` takes each durable call's identity, answers a recorded one from keyed
state (``KeyState``, ``CallRecord``) or the journal, and records new outcomes through the
``CallLedger``. Internal to the runtime: public names are re-exported by
``flink_agents_py.runtime``.
"""
