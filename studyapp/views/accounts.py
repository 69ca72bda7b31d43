"""Login (failed attempts are locked out by the authentication backend), and the role-aware home page."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html")
