-- snap_stacks: every distinct call stack of a snapshot as readable text: the reference's call path, the first user frame and a short user path.
--
-- @private: a helper the other analyses build on.
--
-- One row per (snapshot, stack_id) of snap_frames. Frames are numbered from the innermost
-- (depth 0; with C++ stacks that is the unwinder itself).
--
--   call_path   the reference's display (docs/formats/snapshot.md §4.0): walking from the innermost
--               frame, skip names starting with torch::unwind::, torch::CapturedTraceback::,
--               std::promise or std::error_code; cut names over 80 characters to 77 + '...';
--               write `name:line` (just `name` when line is 0); keep 5; join with ' → '.
--               Unlike the reference the text is not HTML-escaped, and a line stored as -1
--               (PyTorch's 2^64-1) is shown as -1.
--   user_frame  the frame that explains the allocation: the innermost Python frame outside
--               libraries, by the rule function user_frame applies to msMemScope stacks too
--               (docs/attribution.md: not under site-packages, dist-packages, lib/python*,
--               torch/, torch_npu/, Ascend/, inductor's torchinductor_* code, frozen or
--               generated modules); failing that the innermost library Python frame that is
--               not framework plumbing (torch/nn/modules/module.py, torch/_ops.py, torch/_dynamo/,
--               torch/utils/_contextlib.py, torch/overrides.py, _python_dispatch.py,
--               parallel_apply.py: they call the code that allocates, they do not decide it);
--               failing that a native frame that says what the memory is for (a workspace,
--               e.g. at::cuda::getNewWorkspace() of cuBLAS); failing that, on autograd's own
--               thread, the work autograd did:
--               'gradients (AccumulateGrad)', 'autograd: <Node>' (e.g. SubBackward0) or
--               'autograd (backward pass)'; failing that the innermost native frame that
--               MemoryViz's display filter keeps (docs/formats/snapshot.md §6.1) and that is not
--               allocator or dispatch machinery (c10::, at::detail::, at::_ops::, at::meta::,
--               TensorIterator, autograd's VariableType and engine); NULL when none is left.
--               Python frames are written `filename:line:name` as MemoryViz writes frames,
--               native frames by their name alone.
--   user_path   up to 5 such user frames, innermost first, `file:line:name` with the file's
--               base name, joined with ' → '; NULL when the stack has no user Python frame.
--
-- Stacks are per snapshot (stack ids restart in every snapshot); `stack_key` identifies the same
-- content across snapshots (used by snap_compare).
--
-- @column snapshot   VARCHAR the snapshot (source name)
-- @column stack_id   BIGINT  the stack (snap_frames.stack_id)
-- @column frames     BIGINT  count: frames in the stack
-- @column call_path  VARCHAR text: the reference's 5-frame call path (see above)
-- @column user_frame VARCHAR text: the first user frame, filename:line:name (native frames: name); NULL when no frame qualifies
-- @column user_path  VARCHAR text: up to 5 user Python frames, innermost first; NULL when there is none
-- @column stack_key  VARCHAR text: every frame as name|filename|line, innermost first, one per line: equal for equal stacks in any snapshot
WITH
-- every frame with the properties the three projections need
frame_flags AS (
    SELECT snapshot, stack_id, depth, name, filename, line,
           COALESCE(name, filename, '??') AS shown_name,
           ends_with(COALESCE(filename, ''), '.py') AS is_python,
           -- the user-frame rule of every format (function user_frame, docs/attribution.md),
           -- applied to this one frame
           user_frame(filename || ':' || CAST(COALESCE(line, 0) AS VARCHAR) || ':' || COALESCE(name, '??')) IS NOT NULL AS is_user,
           -- MemoryViz's frameFilter (omitFunctions, omitFilenames), plus the allocator itself
           NOT (strpos(COALESCE(name, ''), 'unwind::unwind') > 0
                OR strpos(COALESCE(name, ''), 'CapturedTraceback::gather') > 0
                OR strpos(COALESCE(name, ''), 'gather_with_cpp') > 0
                OR strpos(COALESCE(name, ''), '_start') > 0
                OR strpos(COALESCE(name, ''), '__libc_start_main') > 0
                OR strpos(COALESCE(name, ''), 'PyEval_') > 0
                OR strpos(COALESCE(name, ''), 'PyObject_') > 0
                OR strpos(COALESCE(name, ''), 'PyFunction_') > 0
                OR strpos(COALESCE(name, ''), 'CachingAllocator') > 0
                OR strpos(COALESCE(filename, ''), 'core/boxing') > 0
                OR strpos(COALESCE(filename, ''), '/Register') > 0
                OR strpos(COALESCE(filename, ''), '/Redispatch') > 0
                OR strpos(COALESCE(filename, ''), 'pythonrun.c') > 0
                OR strpos(COALESCE(filename, ''), 'Modules/main.c') > 0
                OR strpos(COALESCE(filename, ''), 'Objects/call.c') > 0
                OR strpos(COALESCE(filename, ''), 'Objects/methodobject.c') > 0
                OR strpos(COALESCE(filename, ''), 'pycore_ceval.h') > 0
                OR strpos(COALESCE(filename, ''), 'ceval.c') > 0
                OR strpos(COALESCE(filename, ''), 'cpython/abstract.h') > 0) AS is_shown,
           -- Python frames that only pass the call on
           ends_with(COALESCE(filename, ''), '.py')
             AND regexp_like(filename, '/torch/(nn/modules/module\.py|_ops\.py|overrides\.py|_dynamo/|utils/_contextlib\.py|utils/_python_dispatch\.py|nn/parallel/parallel_apply\.py)') AS is_plumbing_py,
           -- native allocator, dispatch and autograd-engine frames
           regexp_like(COALESCE(name, ''), '^(c10::|at::detail::|at::TensorBase at::detail::|at::_ops::|at::meta::|at::TensorIteratorBase::|at::\(anonymous namespace\)::create_out|torch::autograd::VariableType::|torch::autograd::Engine::|torch::autograd::Node::|torch::autograd::python::|torch::unwind::|torch::CapturedTraceback::|torch::cuda::)') AS is_plumbing_native,
           -- what autograd's own thread was doing
           CASE WHEN strpos(COALESCE(name, ''), 'AccumulateGrad') > 0 THEN 'gradients (AccumulateGrad)'
                WHEN regexp_like(COALESCE(name, ''), '^torch::autograd::generated::[A-Za-z0-9_]+::apply')
                  THEN 'autograd: ' || regexp_match(name, '^torch::autograd::generated::([A-Za-z0-9_]+)::apply')[1]
                WHEN starts_with(COALESCE(name, ''), 'torch::autograd::Engine::evaluate_function') THEN 'autograd (backward pass)'
           END AS autograd_work
    FROM snap_frames
),
-- the reference's call path: frames it does not skip, numbered from the innermost
reference_parts AS (
    SELECT snapshot, stack_id, depth,
           CASE WHEN character_length(shown_name) > 80 THEN substr(shown_name, 1, 77) || '...' ELSE shown_name END
             || CASE WHEN COALESCE(line, 0) <> 0 THEN ':' || CAST(line AS VARCHAR) ELSE '' END AS part,
           ROW_NUMBER() OVER (PARTITION BY snapshot, stack_id ORDER BY depth) AS n
    FROM frame_flags
    WHERE NOT (starts_with(shown_name, 'torch::unwind::')
               OR starts_with(shown_name, 'torch::CapturedTraceback::')
               OR starts_with(shown_name, 'std::promise')
               OR starts_with(shown_name, 'std::error_code'))
),
reference_paths AS (
    SELECT snapshot, stack_id, string_agg(part, ' → ' ORDER BY depth) AS call_path
    FROM reference_parts
    WHERE n <= 5
    GROUP BY snapshot, stack_id
),
-- candidates for the user frame: 1 = user Python, 2 = library Python that is not plumbing,
-- 3 = a native workspace, 4 = autograd's work, 5 = shown native frame that is not machinery
user_candidates AS (
    SELECT snapshot, stack_id, depth, is_user,
           CASE WHEN is_python
                THEN filename || ':' || CAST(COALESCE(line, 0) AS VARCHAR) || ':' || COALESCE(name, '??')
                WHEN autograd_work IS NOT NULL THEN autograd_work
                ELSE COALESCE(name, '??') END AS frame_text,
           regexp_replace(COALESCE(filename, '??'), '^.*/', '') || ':' || CAST(COALESCE(line, 0) AS VARCHAR) || ':' || COALESCE(name, '??') AS short_text,
           CASE WHEN is_user THEN 1 WHEN is_python THEN 2
                WHEN NOT is_plumbing_native AND strpos(lower(COALESCE(name, '')), 'workspace') > 0 THEN 3
                WHEN autograd_work IS NOT NULL THEN 4 ELSE 5 END AS class
    FROM frame_flags
    WHERE (is_python AND NOT is_plumbing_py)
       OR autograd_work IS NOT NULL
       OR (is_shown AND NOT is_python AND NOT is_plumbing_native)
),
user_frames AS (
    SELECT snapshot, stack_id,
           first_value(frame_text ORDER BY class, depth) AS user_frame
    FROM user_candidates
    GROUP BY snapshot, stack_id
),
user_numbered AS (
    SELECT snapshot, stack_id, depth, short_text,
           ROW_NUMBER() OVER (PARTITION BY snapshot, stack_id ORDER BY depth) AS n
    FROM user_candidates
    WHERE is_user
),
user_paths AS (
    SELECT snapshot, stack_id, string_agg(short_text, ' → ' ORDER BY depth) AS user_path
    FROM user_numbered
    WHERE n <= 5
    GROUP BY snapshot, stack_id
),
-- the whole stack, for matching across snapshots
stacks AS (
    SELECT snapshot, stack_id, COUNT(*) AS frames,
           string_agg(COALESCE(name, '') || '|' || COALESCE(filename, '') || '|' || CAST(COALESCE(line, 0) AS VARCHAR), chr(10) ORDER BY depth) AS stack_key
    FROM snap_frames
    GROUP BY snapshot, stack_id
)
SELECT s.snapshot, s.stack_id, s.frames,
       COALESCE(r.call_path, '(no usable frame)') AS call_path,
       u.user_frame, p.user_path, s.stack_key
FROM stacks s
LEFT JOIN reference_paths r ON r.snapshot = s.snapshot AND r.stack_id = s.stack_id
LEFT JOIN user_frames u ON u.snapshot = s.snapshot AND u.stack_id = s.stack_id
LEFT JOIN user_paths p ON p.snapshot = s.snapshot AND p.stack_id = s.stack_id
