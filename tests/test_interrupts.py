"""Ctrl-C held back for a short step (rag_experiments.interrupts): the block runs to its end, then the
interrupt comes; under xdist too, where a pthread_sigmask on the main thread held nothing."""

from __future__ import annotations

import os
import signal

import pytest

from rag_experiments.interrupts import sigint_held


def test_a_ctrl_c_inside_the_block_comes_after_it():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_held():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the rest of the block")
    assert done == ["the rest of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the old handler is back
    with sigint_held():  # nothing noted: nothing raised
        done.append("quiet")
    assert done[-1] == "quiet"
