"""Second-generation PTMs: recurrent language models (ELMo's biLM, ULMFiT's AWD-LSTM).

Each model lives in its own module; import from those (``ptm_classic.recurrent.bilm``,
``ptm_classic.recurrent.awd_lstm``) so that importing the package stays cheap.
"""
