/*
 * cpp_only.h - included last by every file of src/core: fails the build if a
 * PostgreSQL header came in before it. The core is pure C++ and throws; only
 * src/pg may see PostgreSQL, and it reaches the core through noexcept calls.
 */
#pragma once

#if defined(POSTGRES_H) || defined(PG_CONFIG_H) || defined(C_H)
#error "src/core is pure C++: it must not include PostgreSQL headers"
#endif
