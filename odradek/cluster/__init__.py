"""cluster"""
