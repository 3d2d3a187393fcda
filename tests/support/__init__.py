"""Tools the tests share: processes, harnesses, data. No test module imports another; they
import these."""
