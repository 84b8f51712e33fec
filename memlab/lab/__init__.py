"""The lab: replays transcripts through memory strategies and measures them.

It uses memlab.memory; memlab.memory never imports it.
"""
