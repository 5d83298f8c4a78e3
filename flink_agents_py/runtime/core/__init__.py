"""The core: ``AgentCore``'s mailbox step, the commands it carries out, the stepper.

Internal to the runtime: public names are re-exported by ``flink_agents_py.runtime``.
"""
