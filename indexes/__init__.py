"""replaydb.indexes"""
