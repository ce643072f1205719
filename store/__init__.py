"""replaydb.store"""
