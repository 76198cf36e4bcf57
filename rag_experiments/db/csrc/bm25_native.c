/*
 * bm25_native: the BM25 keyword leg's candidate search as one C aggregate (issue 31).
 *
 * Why C: the leg must sum, per chunk, one weight per posting of every query lexeme. At 1M
 * chunks a query has ~512k postings; PostgreSQL's executor spends ~0.5 us on each (read from
 * the covering key, hashed by text chunk id), ~0.7 s a query, and dynamic pruning cannot skip
 * enough of them on a corpus whose query words are all common. Here the postings of a lexeme
 * arrive as three int4 arrays (bm25_packs, migration 0007: chunk ordinals, tf, dl) and are
 * summed into a dense array indexed by ordinal: a few ns a posting.
 *
 *   bm25_accumulate(w, ords, tfs, dls, n_ords, k1, b, avgdl, depth ORDER BY <term order>)
 *     -> float8[] of (ordinal, raw sum) pairs, flattened: every chunk whose raw sum is at least
 *        (1 - 1e-9) times the depth-th best (all of them when fewer than depth chunks match),
 *        the same set the SQL leg's bm25_top returns.
 *
 * A posting's weight is computed expression for expression as the SQL leg writes it,
 * w * (tf / (tf + k1 * (1 - b + b * dl / avgdl))), in float8, and the sums are taken in the
 * order the rows arrive (the caller orders them as the SQL leg does), so the sums are the same
 * floats. Compiled with -ffp-contract=off so no fused multiply-add changes a rounding.
 *
 * Built and installed by rag_experiments/db/native.py against the embedded server's own headers.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_MODULE_MAGIC;

#ifndef BM25_NATIVE_BUILD
#define BM25_NATIVE_BUILD "unknown"
#endif

typedef struct Bm25Acc
{
	int32		n;				/* ordinals are in [0, n) */
	int32		depth;
	float8	   *acc;			/* raw sum per ordinal */
	uint8	   *seen;
	int32	   *touched;		/* ordinals with a posting, in first-seen order */
	int32		ntouched;
} Bm25Acc;

static int32 *
int4_items(ArrayType *a, const char *what, int *len)
{
	if (ARR_NDIM(a) > 1 || ARR_ELEMTYPE(a) != INT4OID || ARR_HASNULL(a))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bm25_accumulate: %s must be a one-dimensional integer[] without NULLs", what)));
	*len = ARR_NDIM(a) == 0 ? 0 : ARR_DIMS(a)[0];
	return (int32 *) ARR_DATA_PTR(a);
}

PG_FUNCTION_INFO_V1(bm25_acc_trans);
Datum
bm25_acc_trans(PG_FUNCTION_ARGS)
{
	MemoryContext aggctx;
	Bm25Acc    *st;
	float8		w,
				k1,
				b,
				avgdl;
	int			n_ords,
				n_tfs,
				n_dls,
				i;
	int32	   *ords,
			   *tfs,
			   *dls;

	if (!AggCheckCallContext(fcinfo, &aggctx))
		elog(ERROR, "bm25_acc_trans called in non-aggregate context");
	if (PG_ARGISNULL(0))
	{
		int32		n;
		Size		slots;

		if (PG_ARGISNULL(5) || PG_ARGISNULL(9))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("bm25_accumulate: the ordinal bound and the depth must not be NULL")));
		n = PG_GETARG_INT32(5);
		if (n < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bm25_accumulate: ordinal bound %d is negative", n)));
		slots = (Size) Max(n, 1);
		st = (Bm25Acc *) MemoryContextAllocZero(aggctx, sizeof(Bm25Acc));
		st->n = n;
		st->depth = PG_GETARG_INT32(9);
		st->acc = (float8 *) MemoryContextAllocExtended(aggctx, sizeof(float8) * slots,
														 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		st->seen = (uint8 *) MemoryContextAllocExtended(aggctx, slots, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		st->touched = (int32 *) MemoryContextAllocExtended(aggctx, sizeof(int32) * slots, MCXT_ALLOC_HUGE);
	}
	else
		st = (Bm25Acc *) PG_GETARG_POINTER(0);

	/* a term without a pack or weight adds nothing (the caller checks that none is missing) */
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_ARGISNULL(4))
		PG_RETURN_POINTER(st);
	if (PG_ARGISNULL(6) || PG_ARGISNULL(7) || PG_ARGISNULL(8))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bm25_accumulate: k1, b and avgdl must not be NULL")));
	w = PG_GETARG_FLOAT8(1);
	k1 = PG_GETARG_FLOAT8(6);
	b = PG_GETARG_FLOAT8(7);
	avgdl = PG_GETARG_FLOAT8(8);
	ords = int4_items(PG_GETARG_ARRAYTYPE_P(2), "ords", &n_ords);
	tfs = int4_items(PG_GETARG_ARRAYTYPE_P(3), "tfs", &n_tfs);
	dls = int4_items(PG_GETARG_ARRAYTYPE_P(4), "dls", &n_dls);
	if (n_tfs != n_ords || n_dls != n_ords)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bm25_accumulate: ords, tfs and dls differ in length (%d, %d, %d)",
						n_ords, n_tfs, n_dls)));
	for (i = 0; i < n_ords; i++)
	{
		int32		o = ords[i];
		float8		tf = (float8) tfs[i];

		if (o < 0 || o >= st->n)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bm25_accumulate: chunk ordinal %d outside [0, %d)", o, st->n)));
		st->acc[o] += w * (tf / (tf + k1 * ((1.0 - b) + (b * (float8) dls[i]) / avgdl)));
		if (!st->seen[o])
		{
			st->seen[o] = 1;
			st->touched[st->ntouched++] = o;
		}
	}
	PG_RETURN_POINTER(st);
}

/* the smallest of the best `depth` sums, kept in a min-heap */
static void
heap_sift_down(float8 *h, int n, int i)
{
	for (;;)
	{
		int			l = 2 * i + 1,
					r = l + 1,
					m = i;
		float8		t;

		if (l < n && h[l] < h[m])
			m = l;
		if (r < n && h[r] < h[m])
			m = r;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static float8
depth_th_best(const Bm25Acc *st)
{
	float8	   *heap = (float8 *) palloc(sizeof(float8) * st->depth);
	int			nh = 0,
				i;

	for (i = 0; i < st->ntouched; i++)
	{
		float8		s = st->acc[st->touched[i]];

		if (nh < st->depth)
		{
			int			j = nh++;

			heap[j] = s;
			while (j > 0 && heap[(j - 1) / 2] > heap[j])
			{
				float8		t = heap[j];

				heap[j] = heap[(j - 1) / 2];
				heap[(j - 1) / 2] = t;
				j = (j - 1) / 2;
			}
		}
		else if (s > heap[0])
		{
			heap[0] = s;
			heap_sift_down(heap, nh, 0);
		}
	}
	return heap[0];
}

PG_FUNCTION_INFO_V1(bm25_acc_final);
Datum
bm25_acc_final(PG_FUNCTION_ARGS)
{
	Bm25Acc    *st;
	float8		cut = 0.0;
	int			i,
				nout = 0;
	Datum	   *out;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	st = (Bm25Acc *) PG_GETARG_POINTER(0);
	/* the SQL leg: sum >= coalesce(depth-th best, 0) * (1 - 1e-9) */
	if (st->depth > 0 && st->ntouched >= st->depth)
		cut = depth_th_best(st) * (1 - 1e-9);
	out = (Datum *) palloc(sizeof(Datum) * 2 * (Size) Max(st->ntouched, 1));
	for (i = 0; i < st->ntouched; i++)
	{
		int32		o = st->touched[i];

		if (st->acc[o] >= cut)
		{
			out[nout++] = Float8GetDatum((float8) o);
			out[nout++] = Float8GetDatum(st->acc[o]);
		}
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(out, nout, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/* which source this library was built from (native.py rebuilds when it differs) */
PG_FUNCTION_INFO_V1(bm25_native_build);
Datum
bm25_native_build(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(BM25_NATIVE_BUILD));
}
