"""Lua scripting and Redis Functions: a Lua 5.1 state (lupa), its sandbox, the conversions
between Lua values and replies, the script cache and the function libraries."""
