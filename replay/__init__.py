"""replaydb.replay"""
