"""Second-generation PTMs: recurrent language models (ELMo's biLM, ULMFiT's AWD-LSTM).

Each model lives in its own module; import from those (``ptm_core.recurrent.bilm``,
``ptm_core.recurrent.awd_lstm``) so that importing the package stays cheap.
"""
