"""The command line: ``novaberg chat | ask | doctor | config | test-server``."""
