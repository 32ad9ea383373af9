"""COMMAND GETKEYS and COMMAND GETKEYSANDFLAGS byte for byte against Debian's redis-server
7.0, RESP2 and RESP3 (issue #19): key specs by index, keyword and key count, ranges with a
step and a limit, the commands' own key functions (SORT, SET … GET, BITFIELD, GEORADIUS …
STORE, XREAD/XREADGROUP, the key-count forms) and their fallbacks when a spec cannot be
resolved, channels (not keys), and the errors. Also SCRIPT DEBUG, which Headwater accepts
only as NO (no Lua debugger)."""

from __future__ import annotations

import pytest

from tests.differential.harness import assert_same
from tests.helpers import RawClient, ServerProcess

FULL_COMMANDS = [
    # one key, by index, with each family's flags
    "GET k",
    "SET k v",
    "SET k v GET",
    "SET k v EX 10 get",
    "SETNX k v",
    "GETDEL k",
    "GETEX k PERSIST",
    "APPEND k v",
    "INCRBYFLOAT k 1",
    "SETRANGE k 0 v",
    "GETRANGE k 0 1",
    "LCS a b",
    "DEL a b c",
    "UNLINK a b",
    "EXISTS a a",
    "TOUCH a b",
    "MGET a b c",
    "MSET a 1 b 2",
    "MSETNX a 1 b 2 c 3",
    "RENAME a b",
    "RENAMENX a b",
    "COPY a b DB 1",
    "MOVE a 1",
    "EXPIRE k 10",
    "PERSIST k",
    "TTL k",
    "TYPE k",
    "DUMP k",
    "RESTORE k 0 payload",
    "OBJECT ENCODING k",
    "OBJECT FREQ k",
    "MEMORY USAGE k",
    "SETBIT k 1 1",
    "BITCOUNT k",
    "BITPOS k 1",
    "BITOP AND dest a b c",
    "BITFIELD k GET u8 0",
    "BITFIELD k GET u8 0 OVERFLOW SAT GET i4 4",
    "BITFIELD k SET u8 0 1",
    "BITFIELD k INCRBY u8 0 1 GET u8 0",
    "BITFIELD k GET u8",
    "BITFIELD k FOO",
    "BITFIELD_RO k GET u8 0",
    "PFADD h a",
    "PFCOUNT h1 h2",
    "PFMERGE dest a b",
    # hashes, lists, sets, sorted sets
    "HSET h f v",
    "HGETALL h",
    "HDEL h f",
    "HINCRBYFLOAT h f 1",
    "HRANDFIELD h",
    "LPUSH l a",
    "RPOP l",
    "LMOVE a b LEFT RIGHT",
    "RPOPLPUSH a b",
    "BLMOVE a b LEFT RIGHT 0",
    "BLPOP a b c 0",
    "BRPOPLPUSH a b 0",
    "LMPOP 2 a b LEFT",
    "LMPOP 1 a LEFT COUNT 2",
    "LMPOP 0 a LEFT",
    "LMPOP 3 a LEFT",
    "LMPOP x a LEFT",
    "LMPOP -1 a LEFT",
    "BLMPOP 0 2 a b LEFT",
    "BLMPOP 0 5 a b LEFT",
    "SADD s a",
    "SINTER a b c",
    "SINTERSTORE dest a b",
    "SMOVE a b m",
    "SINTERCARD 2 a b LIMIT 1",
    "SINTERCARD 3 a b",
    "SINTERCARD 2abc a b",
    "ZADD z 1 a",
    "ZRANGE z 0 -1",
    "ZRANGESTORE dst src 0 -1",
    "ZUNIONSTORE dest 2 a b WEIGHTS 1 2",
    "ZINTERSTORE dest 1 a",
    "ZDIFFSTORE dest 2 a b",
    "ZUNIONSTORE dest 2abc a b",
    "ZUNIONSTORE dest 5 a b",
    "ZUNION 2 a b",
    "ZINTER 1 a WITHSCORES",
    "ZDIFF 2 a b",
    "ZINTERCARD 2 a b",
    "ZINTERCARD 2x a b",
    "ZMPOP 2 a b MIN",
    "BZMPOP 0 2 a b MAX COUNT 2",
    "BZPOPMIN a b 0",
    "ZPOPMAX z",
    # sorting, geo
    "SORT k",
    "SORT k BY w_* GET o_* STORE dest",
    "SORT k STORE d1 STORE d2",
    "SORT k LIMIT 0 1 STORE dest ALPHA",
    "SORT k GET store",
    "SORT k store",
    "SORT_RO k BY w_*",
    "GEOADD g 1 2 m",
    "GEORADIUS g 1 2 10 km",
    "GEORADIUS g 1 2 10 km STORE dest",
    "GEORADIUS g 1 2 10 km STOREDIST dest",
    "GEORADIUS g 1 2 10 km STORE d1 STOREDIST d2",
    "GEORADIUSBYMEMBER g m 10 km STORE dest",
    "GEORADIUS_RO g 1 2 10 km",
    "GEOSEARCH g FROMMEMBER m BYRADIUS 1 km",
    "GEOSEARCHSTORE dest src FROMMEMBER m BYRADIUS 1 km",
    # streams
    "XADD s * f v",
    "XRANGE s - +",
    "XREAD STREAMS a b 0 0",
    "XREAD COUNT 1 BLOCK 0 STREAMS a 0",
    "XREAD STREAMS a b 0",
    "XREAD STREAMS streams 0",
    "XREADGROUP GROUP g c STREAMS a >",
    "XREADGROUP GROUP g c COUNT 1 NOACK STREAMS a b > >",
    "XREADGROUP GROUP streams c STREAMS a >",
    "XGROUP CREATE s g $",
    "XGROUP SETID s g 0",
    "XINFO STREAM s",
    "XINFO GROUPS s",
    "XACK s g 1-1",
    "XAUTOCLAIM s g c 0 0",
    "XSETID s 1-1",
    "XTRIM s MAXLEN 0",
    # scripts and functions
    "EVAL s 2 a b c",
    "EVAL s 0",
    "EVAL s 0 a",
    "EVAL s 3 a b",
    "EVAL s x a",
    "EVALSHA sha 1 a",
    "EVAL_RO s 1 a",
    "EVALSHA_RO s 1 a b",
    "FCALL f 2 a b",
    "FCALL_RO f 1 a",
    "FCALL f 0",
    # channels, containers, commands without keys
    "PUBLISH ch m",
    "SPUBLISH ch m",
    "SSUBSCRIBE a b",
    "SUBSCRIBE a",
    "PING",
    "CONFIG GET x",
    "CONFIG",
    "CONFIG FOO x",
    "OBJECT",
    "XINFO",
    "XGROUP HELP",
    # errors
    "NOSUCH a",
    "GET",
    "GET a b",
    "MSET a",
    "MSET a 1 b",
    "XGROUP CREATE s",
    "BITFIELD",
]


@pytest.mark.parametrize("resp", [2, 3])
def test_getkeys(headwater: ServerProcess, redis_server: ServerProcess, resp: int) -> None:
    assert_same(headwater, redis_server, [f"COMMAND GETKEYS {c}" for c in FULL_COMMANDS], resp)


@pytest.mark.parametrize("resp", [2, 3])
def test_getkeysandflags(headwater: ServerProcess, redis_server: ServerProcess, resp: int) -> None:
    commands = [f"COMMAND GETKEYSANDFLAGS {c}" for c in FULL_COMMANDS]
    assert_same(headwater, redis_server, commands, resp)


@pytest.mark.parametrize("resp", [2, 3])
def test_getkeysandflags_arity_and_info(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    scenario = [
        "COMMAND GETKEYSANDFLAGS",
        "COMMAND GETKEYSANDFLAGS get",
        "COMMAND INFO command|getkeysandflags client|pause client|unpause script|debug",
        "COMMAND DOCS command|getkeysandflags",
        "COMMAND DOCS client|pause",
        "COMMAND DOCS script|debug",
        "COMMAND INFO publish spublish subscribe wait role",
    ]
    assert_same(headwater, redis_server, scenario, resp)


@pytest.mark.parametrize("resp", [2, 3])
def test_script_debug_no(headwater: ServerProcess, redis_server: ServerProcess, resp: int) -> None:
    scenario = [
        "SCRIPT DEBUG NO",
        "SCRIPT DEBUG no",
        "SCRIPT DEBUG maybe",
        "SCRIPT DEBUG",
        "SCRIPT DEBUG yes no",
        "MULTI",
        "SCRIPT DEBUG NO",
        "EXEC",
        "SCRIPT HELP",
        "EVAL 'return 1' 0",
    ]
    assert_same(headwater, redis_server, scenario, resp)


def test_script_debug_in_a_pipeline(headwater: ServerProcess, redis_server: ServerProcess) -> None:
    """Refused while replies are pending, as Redis refuses it."""
    replies = []
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        try:
            client.send_raw(b"PING\r\nSCRIPT DEBUG NO\r\n")
            replies.append(client.read_reply() + client.read_reply())
        finally:
            client.close()
    assert (
        replies[0]
        == replies[1]
        == (b"+PONG\r\n-ERR SCRIPT DEBUG must be called outside a pipeline\r\n")
    )


def test_script_debug_yes_is_refused_clearly(headwater: ServerProcess) -> None:
    """Redis would start its interactive Lua debugger; Headwater has none and says so."""
    client = RawClient(headwater.port)
    try:
        for mode in ("YES", "sync"):
            reply = client.call("SCRIPT", "DEBUG", mode)
            assert reply.startswith(b"-ERR SCRIPT DEBUG YES and SYNC are not supported")
        assert client.call("EVAL", "return 1", "0") == b":1\r\n"  # and nothing changed
    finally:
        client.close()
