"""Readers of LLM serving engines' own logs (vLLM, SGLang)."""
