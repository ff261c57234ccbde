"""/v1/alerts, /v1/cases and /v1/outcomes: the officer's queue and cases, and the held-payment
outcomes the payment system polls."""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["router"]

router = APIRouter(tags=["alerts and cases"])
