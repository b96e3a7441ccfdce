"""DuckDB side of benches/compare.sh: one process per step, like memq's.

    duck.py ingest DUMP.csv DB.duckdb COPY.parquet   read_csv + regexp_extract, sorted, native table,
                                                     Parquet copy, and the views of duckdb/views.sql
    duck.py query DB.duckdb NAME [KEY=VALUE ...]     runs duckdb/NAME.sql ($KEY replaced by VALUE),
                                                     prints the result as CSV on stdout
"""
import csv
import os
import sys

import duckdb

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "duckdb")


def sql_file(name, params):
    with open(os.path.join(HERE, name + ".sql"), encoding="utf-8") as f:
        text = f.read()
    # Longest names first, so that $T1 does not eat part of $T10.
    for key in sorted(params, key=len, reverse=True):
        text = text.replace("$" + key, params[key])
    return text


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def main(argv):
    if len(argv) >= 4 and argv[0] == "ingest":
        dump, db, parquet = argv[1:4]
        con = duckdb.connect(db)
        con.execute(sql_file("ingest", {"CSV": quote(dump), "PARQUET": quote(parquet)}))
        con.execute(sql_file("views", {}))
        n = con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        con.close()
        print(f"events: {n} rows")
        return 0
    if len(argv) >= 3 and argv[0] == "query":
        db, name = argv[1:3]
        params = dict(a.split("=", 1) for a in argv[3:])
        con = duckdb.connect(db, read_only=True)
        cur = con.execute(sql_file(name, params))
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow([d[0] for d in cur.description])
        while True:
            rows = cur.fetchmany(10000)
            if not rows:
                break
            out.writerows(["" if v is None else v for v in r] for r in rows)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
