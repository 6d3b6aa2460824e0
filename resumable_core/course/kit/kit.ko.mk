# The Korean kit's make: its usage line in Korean. Its commands speak Korean without a setting (the kit's
# library says its language, resumable_core/lab/kit-language); `make lab RESUMABLE_LANG=en`: English.
ifneq ($(RESUMABLE_LANG),en)
CHECK_USAGE := 사용법: make check NB=exercises/<이름>/<이름>.ipynb [ALL=1]
endif
