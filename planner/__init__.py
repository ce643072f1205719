"""replaydb.planner"""
