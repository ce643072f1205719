"""replaydb.bench"""
