"""replaydb.datasets"""
