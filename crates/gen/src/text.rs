//! Static text the simulated job uses: op and kernel names, owners, call-stack templates.
//! Nothing here contains a `"` (the tool never escapes quotes) and only stacks contain commas
//! or newlines, which the writer quotes.

pub const PY_SITE: &str = "/usr/local/python3.10/lib/python3.10/site-packages";

// ---- owners (multi-level, HEAD style) -------------------------------------------------------
pub const OWN_WEIGHT: &str = "PTA@weight";
pub const OWN_GRAD: &str = "PTA@gradient";
pub const OWN_OPT: &str = "PTA@optimizer_state";
pub const OWN_AG: &str = "PTA@fsdp2@all_gather_output@ops";
pub const OWN_ACT: &str = "PTA@activation";
pub const OWN_BWD: &str = "PTA@backward@ops";
pub const OWN_OPS: &str = "PTA@ops";
pub const OWN_LEAK: &str = "PTA@loss_history";
pub const OWN_APP: &str = "CANN@APP";
pub const OWN_HCCL: &str = "CANN@HCCL";
pub const OWN_RUNTIME: &str = "CANN@RUNTIME";
pub const OWN_GE: &str = "CANN@GE";
pub const OWN_AICPU: &str = "CANN@AICPU";
/// Run B's extra owner of a two-run fixture (`memq-gen --compare-run`).
pub const OWN_EXTRA: &str = "PTA@eval_cache";
/// The injected wasted-memory blocks (`memq-gen --wasted`).
pub const OWN_WASTE_EARLY: &str = "PTA@prefetch_buffer";
pub const OWN_WASTE_LATE: &str = "PTA@activation@checkpoint";
pub const OWN_WASTE_IDLE: &str = "PTA@activation@recompute";

// ---- categories (what a block is by construction; docs/attribution.md's names) ---------------
pub const CAT_WEIGHTS: &str = "weights";
pub const CAT_GRADIENTS: &str = "gradients";
pub const CAT_OPTIMIZER: &str = "optimizer_state";
pub const CAT_ACTIVATIONS: &str = "activations";
pub const CAT_WORKSPACE: &str = "workspace";
pub const CAT_COMM: &str = "communication";
pub const CAT_STOCK: &str = "stock";
pub const CAT_FRAMEWORK_POOL: &str = "framework_pool";
pub const CAT_RUNTIME: &str = "runtime";
pub const CAT_OTHER: &str = "other";

/// The category of a block allocated under `owner` by the simulation's usual call sites; the
/// sites whose block is something else (the ATB workspace, the unsharded weight gradient of
/// the backward pass) say so themselves (`sim.rs`).
pub fn category_of(owner: &str) -> &'static str {
    match owner {
        OWN_WEIGHT => CAT_WEIGHTS,
        OWN_GRAD => CAT_GRADIENTS,
        OWN_OPT => CAT_OPTIMIZER,
        // the output buffer of the fsdp2 all-gather collective
        OWN_AG => CAT_COMM,
        // activations, the input batch, the loss, activation gradients, op temporaries
        OWN_ACT | OWN_BWD | OWN_OPS | OWN_WASTE_LATE | OWN_WASTE_IDLE => CAT_ACTIVATIONS,
        OWN_APP => CAT_FRAMEWORK_POOL,
        OWN_HCCL => CAT_COMM,
        OWN_RUNTIME | OWN_GE | OWN_AICPU => CAT_RUNTIME,
        // the loss history the user keeps, run B's evaluation cache, a data prefetch buffer
        _ => CAT_OTHER,
    }
}

/// The oracle's label for blocks without an owner (§5.3).
pub const UNLABELLED: &str = "(未标注)";

/// Level-1 group of an owner string (framework segment dropped, §5.3).
pub fn owner_group(owner: Option<&'static str>) -> &'static str {
    let Some(o) = owner else { return UNLABELLED };
    let mut parts = o.split('@');
    let first = parts.next().unwrap_or("");
    let is_fw = matches!(
        first,
        "PTA" | "PTA_WORKSPACE" | "ATB" | "MINDSPORE" | "HAL" | "HOST" | "HOST_PINNED" | "CANN"
    );
    let g = if is_fw { parts.next() } else { Some(first) };
    match g {
        Some(g) => g,
        None => UNLABELLED,
    }
}

// ---- aten ops ------------------------------------------------------------------------------
pub const OP_ALL_GATHER: &str = "torch._ops._c10d_functional.all_gather_into_tensor.default";
pub const OP_ADDMM: &str = "torch._ops.aten.addmm.default";
pub const OP_GELU: &str = "torch._ops.aten.gelu.default";
pub const OP_TO_COPY: &str = "torch._ops.aten._to_copy.default";
pub const OP_CLONE: &str = "torch._ops.aten.clone.default";
pub const OP_MSE: &str = "torch._ops.aten.mse_loss.default";
pub const OP_MSE_BWD: &str = "torch._ops.aten.mse_loss_backward.default";
pub const OP_MM: &str = "torch._ops.aten.mm.default";
pub const OP_GELU_BWD: &str = "torch._ops.aten.gelu_backward.default";
pub const OP_ADD_: &str = "torch._ops.aten.add_.Tensor";
pub const OP_REDUCE_SCATTER: &str = "torch._ops._c10d_functional.reduce_scatter_tensor.default";
pub const OP_FOREACH_MUL: &str = "torch._ops.aten._foreach_mul_.Scalar";
pub const OP_FOREACH_ADD: &str = "torch._ops.aten._foreach_add_.List";
pub const OP_FOREACH_SQRT: &str = "torch._ops.aten._foreach_sqrt.default";
pub const OP_ZEROS: &str = "torch._ops.aten.zeros_like.default";
pub const OP_MATMUL: &str = "torch._ops.aten.matmul.default";
/// The op run B's extra owner allocates in (`memq-gen --compare-run`); no other op has its name.
pub const OP_EXTRA: &str = "torch._ops.aten.empty.memory_format";

// ---- ATB -----------------------------------------------------------------------------------
pub const ATB_OP: &str = "RmsNormOperation";
pub const ATB_KERNEL: &str = "RmsNormKernel";

// ---- kernels -------------------------------------------------------------------------------
pub const K_MATMUL: &str = "aclnnAddmm_MatMulCommon_MatMulV2";
pub const K_MM: &str = "aclnnMm_MatMulCommon_MatMulV2";
pub const K_GELU: &str = "aclnnGelu_GeluV2_GeluV2";
pub const K_GELU_BWD: &str = "aclnnGeluBackward_GeluGradV2_GeluGradV2";
pub const K_ALLGATHER: &str = "HcomAllGather";
pub const K_REDUCE_SCATTER: &str = "HcomReduceScatter";
pub const K_CAST: &str = "aclnnCast_Cast_Cast";
pub const K_MSE: &str = "aclnnMseLoss_MseLoss_MseLoss";
pub const K_ADD: &str = "aclnnAdd_Add_Add";
pub const K_FOREACH: &str = "aclnnForeachAddList_ForeachAddList_ForeachAddList";
pub const K_MUL: &str = "aclnnForeachMulScalar_ForeachMulScalar_ForeachMulScalar";
pub const K_SQRT: &str = "aclnnForeachSqrt_ForeachSqrt_ForeachSqrt";
pub const K_ZEROS: &str = "aclnnInplaceZero_ZerosLike_ZerosLike";

// ---- MSTX ----------------------------------------------------------------------------------
pub const MSTX_TRAIN_START: &str = "------training start-----";
pub const MSTX_STEP: &str = "step start";

// ---- call stacks (innermost first, every frame newline-terminated) ---------------------------

fn py_frames(frames: &[(&str, u32, &str)]) -> String {
    let mut s = String::new();
    for (file, line, func) in frames {
        if file.starts_with('/') {
            s.push_str(file);
        } else {
            s.push_str(PY_SITE);
            s.push('/');
            s.push_str(file);
        }
        s.push('(');
        s.push_str(&line.to_string());
        s.push_str("): ");
        s.push_str(func);
        s.push('\n');
    }
    s
}

/// The two innermost frames of every driver allocation: the hook and the runtime's call.
const DRIVER_ALLOC: [(&str, &str, u32, u64); 2] = [
    (LIB_HOOK, "halMemAlloc", 0x8c, 0xffff_9c2b_18ac),
    (
        LIB_RUNTIME,
        "_ZN3cce7runtime9NpuDriver11DevMemAllocEPPvmjj",
        0x1d4,
        0xffff_97b6_c1d4,
    ),
];

/// A C stack that starts with the driver allocation frames, then `callers`.
fn driver_frames(callers: &[(&str, &str, u32, u64)]) -> String {
    c_frames(&[&DRIVER_ALLOC[..], callers].concat())
}

fn c_frames(frames: &[(&str, &str, u32, u64)]) -> String {
    let mut s = String::new();
    for (lib, sym, off, addr) in frames {
        s.push_str(lib);
        s.push('(');
        s.push_str(sym);
        s.push_str(&format!("+0x{off:x}) [0x{addr:x}]\n"));
    }
    s
}

const TRAIN: &str = "/home/user/llm/train.py";
const MODEL: &str = "/home/user/llm/model.py";
const LIB_HOOK: &str =
    "/usr/local/python3.10/lib/python3.10/site-packages/msmemscope/lib64/libascend_hal_hook.so";
const LIB_MSTX_HOOK: &str =
    "/usr/local/python3.10/lib/python3.10/site-packages/msmemscope/lib64/libascend_mstx_hook.so";
const LIB_TORCH_NPU: &str =
    "/usr/local/python3.10/lib/python3.10/site-packages/torch_npu/lib/libtorch_npu.so";
const LIB_TORCH_CPU: &str =
    "/usr/local/python3.10/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so";
const LIB_RUNTIME: &str = "/usr/local/Ascend/ascend-toolkit/latest/lib64/libruntime.so";
const LIB_ACL: &str = "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so";
const LIB_HCCL: &str = "/usr/local/Ascend/ascend-toolkit/latest/lib64/libhccl.so";

/// Stack ids used by the simulation; index into [`stack_table`]. 0 means "no stack".
pub mod stk {
    pub const NONE: u32 = 0;
    pub const PY_WEIGHT: u32 = 1;
    pub const PY_ACT: u32 = 2;
    pub const PY_LEAK: u32 = 3;
    pub const PY_OPT: u32 = 4;
    pub const PY_OOM: u32 = 5;
    pub const PY_NA: u32 = 6;
    pub const PY_GRAD: u32 = 7;
    pub const C_PTA: u32 = 8;
    pub const C_HAL_APP: u32 = 9;
    pub const C_HCCL: u32 = 10;
    pub const C_OOM: u32 = 11;
}

/// The interpreter's frames below the C++ callers of an allocation, as a real C stack of a
/// Python program ends: the frame evaluation loop and its calls, nested `depth` times.
fn interpreter_frames(depth: usize) -> String {
    const LIB_PYTHON: &str = "/usr/local/python3.10/lib/libpython3.10.so.1.0";
    let calls = [
        ("_PyEval_EvalFrameDefault", 0x1f3c),
        ("_PyFunction_Vectorcall", 0x7c),
        ("PyObject_Call", 0x5b),
        ("method_vectorcall", 0x29),
    ];
    let frames: Vec<(&str, &str, u32, u64)> = (0..depth)
        .map(|i| {
            let (sym, off) = calls[i % calls.len()];
            (LIB_PYTHON, sym, off, 0x7f3a_5c00_0000 + (i as u64) * 0x1d0)
        })
        .collect();
    c_frames(&frames)
}

/// All stack texts, indexed by the `stk::*` ids; with `deep_c`, each C stack ends with 40
/// interpreter frames (`memq-gen --tool-style`).
pub fn stack_table_of(deep_c: bool) -> Vec<String> {
    let mut t = stack_table();
    if deep_c {
        let tail = interpreter_frames(40);
        for id in [stk::C_PTA, stk::C_HAL_APP, stk::C_HCCL, stk::C_OOM] {
            t[id as usize].push_str(&tail);
        }
    }
    t
}

/// All stack texts, indexed by the `stk::*` ids.
pub fn stack_table() -> Vec<String> {
    let mut t = vec![String::new(); 12];
    t[stk::PY_WEIGHT as usize] = py_frames(&[
        ("torch/nn/modules/module.py", 1340, "convert"),
        ("torch/nn/modules/module.py", 927, "_apply"),
        ("torch/nn/modules/module.py", 1355, "to"),
        (TRAIN, 96, "build_model"),
        (TRAIN, 231, "main"),
        (TRAIN, 260, "<module>"),
    ]);
    t[stk::PY_ACT as usize] = py_frames(&[
        ("torch/nn/modules/linear.py", 125, "forward"),
        ("torch/nn/modules/module.py", 1762, "_call_impl"),
        ("torch/nn/modules/module.py", 1751, "_wrapped_call_impl"),
        (MODEL, 57, "forward"),
        (TRAIN, 148, "train_step"),
        (TRAIN, 236, "main"),
        (TRAIN, 260, "<module>"),
    ]);
    t[stk::PY_LEAK as usize] = py_frames(&[
        (TRAIN, 152, "train_step"),
        (TRAIN, 236, "main"),
        (TRAIN, 260, "<module>"),
    ]);
    t[stk::PY_OPT as usize] = py_frames(&[
        ("torch/optim/adamw.py", 497, "_multi_tensor_adamw"),
        ("torch/optim/adamw.py", 227, "step"),
        ("torch/optim/optimizer.py", 487, "wrapper"),
        (TRAIN, 163, "train_step"),
        (TRAIN, 236, "main"),
        (TRAIN, 260, "<module>"),
    ]);
    t[stk::PY_OOM as usize] = py_frames(&[
        ("torch/nn/modules/linear.py", 125, "forward"),
        ("torch/nn/modules/module.py", 1762, "_call_impl"),
        ("torch/nn/modules/module.py", 1751, "_wrapped_call_impl"),
        (MODEL, 71, "forward"),
        (TRAIN, 148, "train_step"),
        (TRAIN, 236, "main"),
        (TRAIN, 260, "<module>"),
    ]);
    t[stk::PY_NA as usize] = "NA".to_string();
    t[stk::PY_GRAD as usize] = py_frames(&[
        ("torch/autograd/graph.py", 825, "_engine_run_backward"),
        ("torch/autograd/__init__.py", 347, "backward"),
        ("torch/_tensor.py", 626, "backward"),
        (TRAIN, 158, "train_step"),
        (TRAIN, 236, "main"),
        (TRAIN, 260, "<module>"),
    ]);
    t[stk::C_PTA as usize] = c_frames(&[
        (
            LIB_MSTX_HOOK,
            "_ZN8MemScope19PTACachingPoolTrace8AllocateEPvPK18mstxMemHeapDesc_t",
            0x1a4,
            0xffff_9c2a_11a4,
        ),
        (
            LIB_TORCH_NPU,
            "_ZN6c10_npu20NPUCachingAllocator6mallocEPPvimPv",
            0x3c8,
            0xffff_8e3a_43c8,
        ),
        (
            LIB_TORCH_NPU,
            "_ZN6at_npu6native15empty_with_formatEN3c108ArrayRefIlEE",
            0x2f0,
            0xffff_8d1c_22f0,
        ),
        (
            LIB_TORCH_CPU,
            "_ZN2at4_ops5empty4callEN3c108ArrayRefIlEE",
            0x1b8,
            0xffff_88f1_a1b8,
        ),
    ]);
    t[stk::C_HAL_APP as usize] = driver_frames(&[
        (LIB_ACL, "aclrtMallocAlign32", 0x4c, 0xffff_9a31_c04c),
        (
            LIB_TORCH_NPU,
            "_ZN6c10_npu20NPUCachingAllocator10alloc_blockERNS_10AllocParamsEb",
            0x150,
            0xffff_8e3a_1150,
        ),
    ]);
    t[stk::C_HCCL as usize] = driver_frames(&[
        (LIB_ACL, "aclrtMalloc", 0x44, 0xffff_9a31_b044),
        (
            LIB_HCCL,
            "_ZN4hccl17HcclCommunicator13InitCCLbufferEv",
            0x210,
            0xffff_91d2_a210,
        ),
    ]);
    t[stk::C_OOM as usize] = driver_frames(&[
        (LIB_ACL, "aclrtMallocAlign32", 0x4c, 0xffff_9a31_c04c),
        (
            LIB_TORCH_NPU,
            "_ZN6c10_npu20NPUCachingAllocator10alloc_blockERNS_10AllocParamsEb",
            0x150,
            0xffff_8e3a_1150,
        ),
        (
            LIB_TORCH_NPU,
            "_ZN6c10_npu20NPUCachingAllocator6mallocEPPvimPv",
            0x3c8,
            0xffff_8e3a_43c8,
        ),
    ]);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups() {
        assert_eq!(
            owner_group(Some("PTA@fsdp2@all_gather_output@ops")),
            "fsdp2"
        );
        assert_eq!(owner_group(Some("CANN@HCCL")), "HCCL");
        assert_eq!(owner_group(Some("PTA")), UNLABELLED);
        assert_eq!(owner_group(None), UNLABELLED);
    }

    #[test]
    fn stacks_have_no_quotes() {
        for s in stack_table() {
            assert!(!s.contains('"'));
        }
    }
}
