#!/bin/bash
# ~20 hand-written multi cases on the demo corpus (each needs two passages), by an AI agent.
set -e  # golden add refuses a case already there: run once on a new file
cd /work/main
G=experiments/golden/demo_multi.jsonl
A="AI coding agent (Claude) in a development session (issue 47 item 2); no API call"
add() { .venv/bin/rag-exp golden add --golden $G --by agent --author "$A" --kind multi "$@"; }
add --query "How can one session wait for a signal from another session, and can the signal carry some data?" \
  --source-uri sql-listen.md --quote "registers the current session as a listener on the notification channel named" \
  --group sql-notify.md "A payload string can be sent along with the notification"
add --query "How do I make a server-side prepared statement that takes parameters, and free it before my session ends?" \
  --source-uri sql-prepare.md --quote "Prepared statements can take parameters: values that are substituted into the statement when it is executed." \
  --group sql-deallocate.md "If you do not explicitly deallocate a prepared statement, it is deallocated when the session ends."
add --query "How can I read a huge query result a few rows at a time, and where does the reading position start?" \
  --source-uri sql-declare.md --quote "which can be used to retrieve a small number of rows at a time out of a larger query" \
  --group sql-fetch.md "When created, a cursor is positioned before the first row."
add --query "Can I store a query's result as a view that keeps its data, and update it later without blocking readers?" \
  --source-uri sql-creatematerializedview.md --quote "The query is executed and used to populate the view at the time the command is issued" \
  --group sql-refreshmaterializedview.md "Refresh the materialized view without locking out concurrent selects on the materialized view."
add --query "How do I mark a point inside a transaction and later undo only the work done after it?" \
  --source-uri sql-savepoint.md --quote "establishes a new savepoint within the current transaction." \
  --group sql-rollback-to.md "Roll back all commands that were executed after the savepoint was established."
add --query "Two-phase commit: what must I turn on in the server config, and does a prepared transaction survive a crash?" \
  --source-uri runtime-config-resource.md --quote "Setting this parameter to zero (which is the default) disables the prepared-transaction feature." \
  --group sql-prepare-transaction.md "its state is fully stored on disk, and there is a very high probability that it can be committed successfully, even if a database crash occurs before the commit is requested."
add --query "To copy table changes to another server logically, what do I create on the source side and what on the receiving side?" \
  --source-uri sql-createpublication.md --quote "A publication is essentially a group of tables whose data changes are intended to be replicated through logical replication." \
  --group sql-createsubscription.md "A subscription represents a replication connection to the publisher."
add --query "How do I add an index to a busy table without stopping writes, and rebuild a broken index the same way?" \
  --source-uri sql-createindex.md --quote "PostgreSQL will build the index without taking any locks that prevent concurrent inserts, updates, or deletes on the table" \
  --group sql-reindex.md "PostgreSQL will rebuild the index without taking any locks that prevent concurrent inserts, updates, or deletes on the table"
add --query "How do I get slow statements written to the server log, and then see where a slow one spends its time?" \
  --source-uri runtime-config-logging.md --quote "Causes the duration of each completed statement to be logged if the statement ran for at least the specified amount of time." \
  --group sql-explain.md "Carry out the command and show actual run times and other statistics."
add --query "When does the background cleanup start on a table by itself, and what does the heavy manual cleanup do differently?" \
  --source-uri runtime-config-autovacuum.md --quote "Specifies the minimum number of updated or deleted tuples needed to trigger a" \
  --group sql-vacuum.md "can reclaim more space, but takes much longer and exclusively locks the table."
add --query "How do I make a counter object for ids, and is fetching its next number safe when many sessions do it at once?" \
  --source-uri sql-createsequence.md --quote "creates a new sequence number generator." \
  --group functions-sequence.md "Advances the sequence object to its next value and returns that value. This is done atomically"
add --query "Can I change a server setting with a SQL command instead of editing the config file, and when does the change apply?" \
  --source-uri sql-altersystem.md --quote "It can be more convenient than the traditional method of manually editing the" \
  --group sql-altersystem.md "will be effective after the next server configuration reload"
add --query "How does the planner price reading pages out of order, and how do I refresh the data statistics it relies on?" \
  --source-uri runtime-config-query.md --quote "Sets the planner's estimate of the cost of a non-sequentially-fetched disk page." \
  --group sql-analyze.md "Subsequently, the query planner uses these statistics to help determine the most efficient execution plans for queries."
add --query "If I lock a whole table explicitly and someone else holds a conflicting lock, what happens, and after how long is a deadlock checked?" \
  --source-uri sql-lock.md --quote "obtains a table-level lock, waiting if necessary for any conflicting locks to be released." \
  --group runtime-config-locks.md "This is the amount of time to wait on a lock before checking to see if there is a deadlock condition."
add --query "On the primary, how many replicas may stream at once, and how long does a replica pause before asking again for missing WAL?" \
  --source-uri runtime-config-replication.md --quote "Specifies the maximum number of concurrent connections from standby servers or streaming base backup clients" \
  --group runtime-config-replication.md "Specifies how long the standby server should wait when WAL data is not available from any sources"
add --query "How do I open a transaction block, and what does choosing its isolation level change?" \
  --source-uri sql-begin.md --quote "initiates a transaction block, that is, all statements after a" \
  --group sql-set-transaction.md "The isolation level of a transaction determines what data the transaction can see when other transactions are running concurrently:"
add --query "What is a role, and how do I hand it rights on a table?" \
  --source-uri sql-createrole.md --quote "A role is an entity that can own database objects and have database privileges" \
  --group sql-grant.md "one that grants privileges on a database object"
add --query "How do index-only scans skip reading the table, and how does vacuum use the same per-page information?" \
  --source-uri indexes-index-only-scans.md --quote "checks the visibility map bit for the corresponding heap page" \
  --group sql-vacuum.md "will skip pages based on the visibility map."
add --query "How do I track statistics across correlated columns for the planner, and what command collects table statistics?" \
  --source-uri sql-createstatistics.md --quote "will create a new extended statistics object tracking data about the specified table" \
  --group sql-analyze.md "collects statistics about the contents of tables in the database"
add --query "How do I set up a new storage location on disk for tables, and make new tables land there by default?" \
  --source-uri sql-createtablespace.md --quote "registers a new cluster-wide tablespace." \
  --group runtime-config-client.md "This variable specifies the default tablespace in which to create objects (tables and indexes)"
