"""replaydb.operators"""
