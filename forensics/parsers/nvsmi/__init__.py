"""nvsmi"""
