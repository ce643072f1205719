"""replaydb.replaydb"""
