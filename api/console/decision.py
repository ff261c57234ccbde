"""Placeholder: filled in by its owner."""

from fastapi import APIRouter

router = APIRouter(prefix="/console")
