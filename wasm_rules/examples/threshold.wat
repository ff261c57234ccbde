;; A hand-written rule module implementing sealtrail's rule module ABI v1 (see README).
;; Two features (amount_usd, model_score) and two rules:
;;   LARGE_AMOUNT  amount_usd >= 10000   -> REVIEW (1)
;;   HIGH_SCORE    model_score >= 0.9    -> HOLD   (2)
;; Any module that keeps this contract is accepted, whatever it was written in.
(module
  (@custom "sealtrail.manifest.v1" "{\"abi\":1,\"compiler\":\"hand-written WAT\",\"description\":\"ABI v1 example\",\"feature_tables\":{},\"features\":[\"amount_usd\",\"model_score\"],\"rules\":[{\"id\":\"LARGE_AMOUNT\",\"outcome\":\"REVIEW\",\"reason\":\"amount of USD 10,000 or more\",\"severity\":\"medium\",\"when\":\"amount_usd >= 10000\"},{\"id\":\"HIGH_SCORE\",\"outcome\":\"HOLD\",\"reason\":\"model score of 0.9 or more\",\"severity\":\"high\",\"when\":\"model_score >= 0.9\"}],\"ruleset_id\":\"threshold_example\",\"source_sha256\":\"\",\"version\":\"1\"}")
  ;; layout: 256 rows; inputs at 1024 (256 * 16 bytes), outcomes at 8192, fired words at 9216
  (memory (export "memory") 1 1)
  (func (export "abi_version") (result i32) (i32.const 1))
  (func (export "n_features") (result i32) (i32.const 2))
  (func (export "n_rules") (result i32) (i32.const 2))
  (func (export "max_rows") (result i32) (i32.const 256))
  (func (export "input_ptr") (result i32) (i32.const 1024))
  (func (export "outcome_ptr") (result i32) (i32.const 8192))
  (func (export "fired_ptr") (result i32) (i32.const 9216))
  (func (export "evaluate") (param $n i32) (result i32)
    (local $i i32) (local $bits i64) (local $best i32) (local $row i32)
    (if (i32.gt_u (local.get $n) (i32.const 256)) (then (return (i32.const 1))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $row (i32.add (i32.const 1024) (i32.shl (local.get $i) (i32.const 4))))
        (local.set $bits (i64.const 0))
        (local.set $best (i32.const 0))
        (if (f64.ge (f64.load (local.get $row)) (f64.const 10000))
          (then (local.set $bits (i64.const 1)) (local.set $best (i32.const 1))))
        (if (f64.ge (f64.load offset=8 (local.get $row)) (f64.const 0.9))
          (then (local.set $bits (i64.or (local.get $bits) (i64.const 2)))
                (local.set $best (i32.const 2))))
        (i32.store8 (i32.add (i32.const 8192) (local.get $i)) (local.get $best))
        (i64.store (i32.add (i32.const 9216) (i32.shl (local.get $i) (i32.const 3)))
                   (local.get $bits))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0)))
