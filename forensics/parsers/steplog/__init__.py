"""steplog"""
