"""What a user's action holds: its ``ActionContext``, the futures it awaits, its memories.

Internal to the runtime: the public names are re-exported by ``flink_agents_py.runtime``.
"""
