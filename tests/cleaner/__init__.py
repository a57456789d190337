"""cleaner tests"""
