"""Feeds ParaTwin's emitted plans to the frameworks' own checks and compares what they would run with
the plan. Usage: emit_check.py megatron|deepspeed CASES_DIR (run by bench/emit_check.sh, which fills
CASES_DIR/<case>/ with plan.yaml, megatron.sh, deepspeed.json or deepspeed.err, deepspeed.rc).
Prints one tab-separated line per case: case, verdict, problems; then the stubs that were used.
Megatron-LM: its argument parser, validate_args (with pretrain_gpt.py's defaults), the GPT model,
optimizer, DDP and training configs pretrain_gpt.py builds, its micro-batch calculator, and the layer
offsets and counts each pipeline chunk builds. DeepSpeed: DeepSpeedConfig, checkpointing.configure,
the engine's sanity checks, and the pipeline engine's and MoE's ZeRO checks.
"""
import contextlib
import io
import logging
import os
import shlex
import sys
import traceback
import warnings

import emit_stubs

FRAMEWORK, CASES = sys.argv[1], sys.argv[2]
emit_stubs.install(FRAMEWORK)
warnings.filterwarnings('ignore')
logging.disable(logging.WARNING)

import yaml  # noqa: E402


def read_launch(path):
    """The emitted launch: exported variables, torchrun's world size, pretrain_gpt.py's arguments."""
    env, words = {}, []
    text = ' '.join(line.rstrip('\\\n').strip() for line in open(path) if not line.lstrip().startswith('#'))
    tokens = shlex.split(text)
    while tokens and tokens[0] == 'export':
        key, value = tokens[1].split('=', 1)
        env[key] = value
        tokens = tokens[2:]
    assert tokens[0] == 'torchrun', 'expected torchrun, got %s' % tokens[0]
    nodes = int(tokens[tokens.index('--nnodes') + 1])
    procs = int(tokens[tokens.index('--nproc-per-node') + 1])
    words = tokens[tokens.index('pretrain_gpt.py') + 1:]
    return env, nodes * procs, words


def plan_chunks(plan):
    return [tuple(stage['layers']) for stage in plan['stages']]


def uniform_recompute(plan):
    modes = {stage['recompute'] for stage in plan['stages']}
    return 'full' if 'full' in modes else 'selective' if 'selective' in modes else 'none'


def megatron_gpu_kernels():
    """Transformer Engine's fused RoPE kernels (a GPU library) that TransformerConfig asks for."""
    from megatron.core.models.common.embeddings import rope_utils
    if rope_utils.fused_apply_rotary_pos_emb is None:
        rope_utils.fused_apply_rotary_pos_emb = emit_stubs.stub('fused_apply_rotary_pos_emb')
        rope_utils.fused_apply_rotary_pos_emb_thd = emit_stubs.stub('fused_apply_rotary_pos_emb_thd')
        emit_stubs.record('rope_utils.fused_apply_rotary_pos_emb(_thd)', 'Transformer Engine GPU kernels')


def megatron_case(case_dir, plan):
    import megatron.training.arguments as arguments
    from megatron.core import parallel_state
    from megatron.core.num_microbatches_calculator import (destroy_num_microbatches_calculator,
                                                           get_num_microbatches, init_num_microbatches_calculator)
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset
    from megatron.training.argument_utils import gpt_config_from_args, pretrain_cfg_container_from_args

    megatron_gpu_kernels()
    env, world, words = read_launch(os.path.join(case_dir, 'megatron.sh'))
    os.environ.pop('CUDA_DEVICE_MAX_CONNECTIONS', None)
    os.environ.update(env)
    os.environ['WORLD_SIZE'] = str(world)
    sys.argv = ['pretrain_gpt.py'] + words
    with contextlib.redirect_stdout(io.StringIO()):
        args = arguments.parse_args()
        arguments.validate_args(args, {'tokenizer_type': 'GPT2BPETokenizer'})  # pretrain_gpt.py's defaults
        model = gpt_config_from_args(args)
        pretrain_cfg_container_from_args(args, model)
    config = model.transformer
    init_num_microbatches_calculator(0, None, args.global_batch_size, args.micro_batch_size,
                                     args.data_parallel_size, False)
    try:
        microbatches = get_num_microbatches()
    finally:
        destroy_num_microbatches_calculator()
    vpp = args.virtual_pipeline_model_parallel_size or 1
    parallel_state.set_virtual_pipeline_model_parallel_world_size(vpp if vpp > 1 else None)
    chunks = []
    for vp_stage in range(vpp):
        for pp_rank in range(args.pipeline_model_parallel_size):
            parallel_state.set_pipeline_model_parallel_rank(pp_rank)
            stage = vp_stage if vpp > 1 else None
            begin = get_transformer_layer_offset(config, stage, pp_rank)
            chunks.append((begin, begin + get_num_layers_to_build(config, stage, pp_rank)))
    order = 'tp-cp-pp-dp' if args.use_tp_pp_dp_mapping else 'tp-cp-dp-pp'
    fsdp = getattr(args, 'use_megatron_fsdp', False)
    zero = (0 if not args.use_distributed_optimizer else 1) if not fsdp else \
        {'optim_grads': 2, 'optim_grads_params': 3}.get(args.data_parallel_sharding_strategy, -1)
    recompute = args.recompute_granularity or 'none'
    if recompute == 'full' and (args.recompute_method, args.recompute_num_layers) != ('uniform', 1):
        recompute = 'full/%s/%s' % (args.recompute_method, args.recompute_num_layers)
    same_order = {'tp-cp-dp-pp': 'tp-cp-dp-pp', 'tp-cp-pp-dp': 'tp-cp-pp-dp',
                  'tp-dp-cp-pp': 'tp-cp-dp-pp', 'tp-pp-cp-dp': 'tp-cp-pp-dp'}[plan['order']]
    ran = {'dp': args.data_parallel_size, 'tp': args.tensor_model_parallel_size,
           'pp': args.pipeline_model_parallel_size, 'cp': args.context_parallel_size,
           'ep': args.expert_model_parallel_size, 'virtual_stages': vpp, 'micro_batch': args.micro_batch_size,
           'num_microbatches': microbatches, 'chunks': chunks, 'order': order, 'zero': zero,
           'recompute': recompute, 'sequence_parallel': bool(args.sequence_parallel),
           'offload_optimizer': bool(args.optimizer_cpu_offload)}
    wanted = {'dp': plan['dp'], 'tp': plan['tp'], 'pp': plan['pp'], 'cp': plan['cp'], 'ep': plan['ep'],
              'virtual_stages': plan['virtual_stages'], 'micro_batch': plan['micro_batch'],
              'num_microbatches': plan['num_microbatches'], 'chunks': plan_chunks(plan),
              'order': same_order, 'zero': plan['zero'], 'recompute': uniform_recompute(plan),
              'sequence_parallel': plan['sequence_parallel'] and plan['tp'] > 1,
              'offload_optimizer': plan['offload']['optimizer'] and plan['zero'] >= 1}
    return [k + ': plan %s, Megatron runs %s' % (wanted[k], ran[k]) for k in wanted if ran[k] != wanted[k]]


class FakeMpu:
    """The model-parallel unit a launched job passes DeepSpeed: this rank's groups' sizes (rank 0)."""

    def __init__(self, dp, tp, pp):
        self.dp, self.tp, self.pp = dp, tp, pp

    def get_data_parallel_world_size(self):
        return self.dp

    def get_data_parallel_rank(self):
        return 0

    def get_data_parallel_group(self):
        return None

    def get_model_parallel_world_size(self):
        return self.tp

    def get_model_parallel_rank(self):
        return 0

    def get_model_parallel_group(self):
        return None

    get_tensor_model_parallel_world_size = get_model_parallel_world_size
    get_tensor_model_parallel_rank = get_model_parallel_rank
    get_tensor_model_parallel_group = get_model_parallel_group

    def get_pipeline_model_parallel_world_size(self):
        return self.pp


def deepspeed_engine_checks(config, plan, moe):
    """The engine's own checks, run on a probe that carries only the parsed config (no model, no GPU)."""
    import torch
    from deepspeed.moe.layer import MoE
    from deepspeed.runtime.engine import DeepSpeedEngine
    from deepspeed.runtime.pipe.engine import PipelineEngine
    from deepspeed.runtime.pipe.module import PipelineModule

    engine = DeepSpeedEngine.__new__(DeepSpeedEngine)
    engine._config, engine.client_optimizer, engine.client_lr_scheduler = config, None, None
    engine.pipeline_parallelism = plan['pp'] > 1
    DeepSpeedEngine._do_sanity_check(engine)
    if moe and config.zero_optimization_stage == 3:
        model = torch.nn.Module()
        expert = MoE.__new__(MoE)
        torch.nn.Module.__init__(expert)
        model.add_module('moe', expert)
        object.__setattr__(engine, 'module', model)
        engine.has_moe_layers = True
        DeepSpeedEngine._validate_zero3_moe_compatibility(engine)
    if plan['pp'] > 1:
        class PastTheZeroCheck(Exception):
            pass

        class Probe(PipelineEngine):
            def __setattr__(self, key, value):
                if key == 'enable_backward_allreduce':  # the line after the ZeRO assertion
                    raise PastTheZeroCheck()
                object.__setattr__(self, key, value)

        def base_init(self, *args, **kwargs):
            object.__setattr__(self, '_config', config)
            object.__setattr__(self, 'module', PipelineModule.__new__(PipelineModule))

        real_init, DeepSpeedEngine.__init__ = DeepSpeedEngine.__init__, base_init
        try:
            Probe()
        except PastTheZeroCheck:
            pass
        finally:
            DeepSpeedEngine.__init__ = real_init


def deepspeed_case(case_dir, plan):
    import json
    import deepspeed.comm as dist
    from deepspeed.runtime.activation_checkpointing import checkpointing
    from deepspeed.runtime.config import DeepSpeedConfig

    from deepspeed.accelerator import get_accelerator
    accelerator = get_accelerator()  # a GPU query: the CPU accelerator here, a Hopper GPU there
    accelerator.is_bf16_supported = accelerator.is_fp16_supported = lambda: True
    emit_stubs.record('get_accelerator().is_bf16_supported, is_fp16_supported (True)', 'GPU query')
    dist.get_rank = lambda group=None: 0  # rank 0 of a launched job (no process group here)
    emit_stubs.record('deepspeed.comm.get_rank (0)', 'process group of a launched job')
    moe = '--num-experts' in open(os.path.join(case_dir, 'megatron.sh')).read()
    mpu = FakeMpu(plan['dp'], plan['tp'], plan['pp'])
    rc = int(open(os.path.join(case_dir, 'deepspeed.rc')).read())
    if rc != 0:
        reason = open(os.path.join(case_dir, 'deepspeed.err')).read().strip().splitlines()[-1]
        # DeepSpeed's own checks on the same ZeRO stage, batch and pipeline: they must refuse it too.
        config = DeepSpeedConfig({'train_batch_size': plan['dp'] * plan['micro_batch'] * plan['num_microbatches'],
                                  'train_micro_batch_size_per_gpu': plan['micro_batch'],
                                  'gradient_accumulation_steps': plan['num_microbatches'],
                                  'zero_optimization': {'stage': plan['zero']}}, mpu=mpu)
        try:
            deepspeed_engine_checks(config, plan, moe)
        except AssertionError as error:
            return 'refused', ['ParaTwin (exit %d): %s' % (rc, reason.split('DeepSpeed cannot run this plan: ')[-1]),
                               'DeepSpeed: ' + str(error)]
        return 'refused', ['ParaTwin (exit %d) refused what DeepSpeed accepts: %s' % (rc, reason)]
    path = os.path.join(case_dir, 'deepspeed.json')
    config = DeepSpeedConfig(path, mpu=mpu)
    checkpointing.configure(mpu, deepspeed_config=path)
    deepspeed_engine_checks(config, plan, moe)
    json.load(open(path))
    ran = {'dp': config.world_size, 'micro_batch': config.train_micro_batch_size_per_gpu,
           'num_microbatches': config.gradient_accumulation_steps,
           'global_batch': config.train_batch_size, 'zero': int(config.zero_optimization_stage)}
    wanted = {'dp': plan['dp'], 'micro_batch': plan['micro_batch'], 'num_microbatches': plan['num_microbatches'],
              'global_batch': plan['dp'] * plan['micro_batch'] * plan['num_microbatches'], 'zero': plan['zero']}
    problems = [k + ': plan %s, DeepSpeed runs %s' % (wanted[k], ran[k]) for k in wanted if ran[k] != wanted[k]]
    return ('accepted' if not problems else 'differs'), problems


def main():
    for case in sorted(os.listdir(CASES)):
        case_dir = os.path.join(CASES, case)
        plan = yaml.safe_load(open(os.path.join(case_dir, 'plan.yaml')))
        try:
            if FRAMEWORK == 'megatron':
                problems = megatron_case(case_dir, plan)
                verdict = 'accepted' if not problems else 'differs'
            else:
                verdict, problems = deepspeed_case(case_dir, plan)
        except (AssertionError, ValueError, RuntimeError, TypeError, KeyError, SystemExit) as error:
            verdict = 'rejected'
            where = traceback.extract_tb(error.__traceback__)[-1]
            problems = ['%s: %s (%s:%d)' % (type(error).__name__, str(error).strip().splitlines()[0] if str(error)
                                             else '', os.path.basename(where.filename), where.lineno)]
        print('%s\t%s\t%s' % (case, verdict, '; '.join(problems)), flush=True)
    for name, why in emit_stubs.STUBS:
        print('stub\t%s\t%s' % (why, name))


main()
