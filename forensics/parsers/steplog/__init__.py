"""The step-log formats: one reader (reader.py) for the generic shapes (generic.py) and the framework
families (families.py), then the general reader (general.py) on the lines those leave; the entry
modules markers, deepspeed, megatron and hf_trainer say which format a file is and read it with that
reader."""
