"""Login with throttling, and the role-aware home page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from studyapp.forms import ThrottledAuthenticationForm


class LoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm
    template_name = "registration/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    """Sign out and say so on the next page, so nobody wonders whether the click worked."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        was_signed_in = request.user.is_authenticated
        response = super().post(request, *args, **kwargs)
        if was_signed_in:
            messages.success(request, "You are signed out. Thank you; your work is saved.")
        return response


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html")
