"""The isolated re-check: a graded notebook's test cells run again outside the learner's kernel.

:mod:`.driver` runs it; :mod:`.plan` says which calls; :mod:`.learner` starts the learner's
process and :mod:`.restarter` a fresh one; :mod:`.boundary` and :mod:`.rpc` carry data between
them; :mod:`.syscalls` observes what a traced call did; :mod:`.learner_view` is the library the
learner's processes see. This package imports nothing, so a sandbox that needs only the channel
loads only the channel.
"""
