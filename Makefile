# webhook_idem - PGXS build, plus the project's test, demo and bench entry points.
#
#   make demo    set up this machine, build, install, run the demo on a throwaway cluster
#   make test    set up, build, install and run every suite (unit, regress,
#                isolation, TAP, fuzz)
#   make bench   the long benchmark (QUICK=1 for a short one)

EXTENSION = webhook_idem
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = webhook_idem
CORE_SRCS = $(sort $(wildcard src/core/*.cpp src/core/schemes/*.cpp))
PG_SRCS = $(sort $(wildcard src/pg/*.cpp))
OBJS = $(CORE_SRCS:.cpp=.o) $(PG_SRCS:.cpp=.o)

# The current version's install script is assembled from src/sql/*.sql in
# name order. The install scripts of released versions are frozen as users
# have them (src/sql/released/), and every release adds an upgrade script
# from the one before it (src/sql/upgrade/).
INSTALL_PARTS = $(sort $(wildcard src/sql/[0-9]*.sql))
DATA_built = $(EXTENSION)--$(EXTVERSION).sql
DATA = $(wildcard src/sql/released/$(EXTENSION)--*.sql) \
	$(wildcard src/sql/upgrade/$(EXTENSION)--*--*.sql)

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --load-extension=$(EXTENSION)
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)

PG_CONFIG ?= pg_config
WERROR ?= -Werror
PG_CPPFLAGS = -I$(CURDIR)/src
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-register -Wno-missing-field-initializers $(WERROR) -MMD -MP
SHLIB_LINK = -lssl -lcrypto -lstdc++

EXTRA_CLEAN = $(EXTENSION)--$(EXTVERSION).sql $(OBJS:.o=.d) build results regression.diffs \
	regression.out output_iso tmp_check log

.DEFAULT_GOAL := all

PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifneq ($(wildcard $(PGXS)),)
# No JIT bitcode: PGXS would compile the C++ with clang and C flags only.
override with_llvm = no
include $(PGXS)

# PostgreSQL's headers are system headers to us: their warnings are not ours.
override CPPFLAGS := $(patsubst -I$(includedir_server),-isystem $(includedir_server),$(CPPFLAGS))

# Every object depends on the headers it includes (-MMD writes a .d file
# beside it), so editing a header rebuilds what uses it.
-include $(OBJS:.o=.d)

$(EXTENSION)--$(EXTVERSION).sql: $(INSTALL_PARTS)
	cat $^ > $@
else
# Without PGXS only the entry points that install it (setup, demo, test,
# bench) can run.
all install installcheck:
	@echo "PGXS is not installed: run 'make setup' (or make demo / make test)" >&2; exit 1
endif

include test/test.mk
include bench/micro/micro.mk
