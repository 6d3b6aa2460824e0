# The Korean kit's language: `make lab`, `make test` and `make check` run with RESUMABLE_LANG=ko,
# so the checks' messages, the reveals and the feedback are Korean. `make lab RESUMABLE_LANG=en`: English.
export RESUMABLE_LANG ?= ko
ifeq ($(RESUMABLE_LANG),ko)
CHECK_USAGE := 사용법: make check NB=exercises/<이름>/<이름>.ipynb [ALL=1]
endif
