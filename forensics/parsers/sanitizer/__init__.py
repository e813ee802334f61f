"""sanitizer"""
