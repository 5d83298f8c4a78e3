"""Jobs built on flink-agents-py: ``jobs.review_analysis``, the main job."""
